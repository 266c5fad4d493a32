package v1

// ServingLabel marks, with the value "true", the PolicyRevision the webhook configuration
// currently calls for its policy (the policy's status.servingGeneration). The controller sets it
// after moving the webhook and removes it from every other revision; a replica reads it, from the
// revisions it already watches, to know what it must serve before it calls itself ready.
const ServingLabel = "regent.dev/serving"
