package rollout

import (
	sdkv1alpha1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// toSDK spells a Policy's rollout status as sdk-go's handler expects it.
func toSDK(s policyv1.RolloutStatus) sdkv1alpha1.RolloutStatus {
	switch s {
	case policyv1.RolloutProgressing:
		return sdkv1alpha1.Progressing
	case policyv1.RolloutSucceeded:
		return sdkv1alpha1.Succeeded
	case policyv1.RolloutFailed:
		return sdkv1alpha1.Failed
	case policyv1.RolloutTimeOut:
		return sdkv1alpha1.TimeOut
	default:
		return sdkv1alpha1.ToApply
	}
}
