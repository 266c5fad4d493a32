package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// components are the long-running subcommands: they log a start line with the version. Every
// other command is a tool whose output is for the user.
var components = map[string]bool{"hub": true, "spoke-addon": true, "policy-server": true, "reports-aggregator": true, "quickstart": true}

// hiddenWithoutExample are the hidden commands exempt from showing an example, and why.
var hiddenWithoutExample = map[string]string{
	"regent quickstart pause": "the process the real node's pod sandboxes run, never typed",
	"regent __complete":       "cobra's completion request, run by the shell's completion script",
	"regent __completeNoDesc": "cobra's completion request, run by the shell's completion script",
}

// Every command's --help shows an example, and every example line that runs regent names flags
// and arguments the command it runs accepts, so help cannot drift from the code.
func TestEveryCommand_HelpShowsAnExampleThatParses(t *testing.T) {
	seen := 0
	walk(newRootCommand(), func(cmd *cobra.Command) {
		path := cmd.CommandPath()
		if why, ok := hiddenWithoutExample[path]; ok {
			if !cmd.Hidden {
				t.Errorf("%s is exempt from examples (%s) but shows in help", path, why)
			}
			return
		}
		if cmd.Hidden {
			t.Errorf("hidden command %s: show an example or say in hiddenWithoutExample why not", path)
			return
		}
		seen++
		args := strings.Fields(path)[1:]
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--help"))
		if err := root.Execute(); err != nil {
			t.Fatalf("%s --help: %v", path, err)
		}
		if !strings.Contains(out.String(), "\nExamples:\n  ") {
			t.Errorf("%s --help shows no example:\n%s", path, out.String())
			return
		}
		// pflag shows a flag's usage text between backquotes as the flag's value type.
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: help shows %q as its value's type", path, f.Name, strings.Split(f.Usage, "`")[1])
			}
		})
		runsItself := false
		for _, line := range exampleCommands(cmd.Example) {
			ran, err := parseExample(line)
			if err != nil {
				t.Errorf("%s: example %q: %v", path, line, err)
				continue
			}
			runsItself = runsItself || strings.HasPrefix(ran+" ", path+" ")
		}
		if !runsItself && cmd.HasParent() {
			t.Errorf("%s: no example runs it:\n%s", path, cmd.Example)
		}
		// The root runs nothing: it prints its help.
		if cmd.HasParent() && isTool(cmd) == components[args[0]] {
			t.Errorf("%s: a tool (no start line) is %t, want %t", path, isTool(cmd), !components[args[0]])
		}
	})
	if seen < 22 {
		t.Errorf("walked %d commands: the walk misses the command tree", seen)
	}
}

func walk(cmd *cobra.Command, visit func(*cobra.Command)) {
	visit(cmd)
	for _, c := range cmd.Commands() {
		walk(c, visit)
	}
}

// exampleCommands are the example's command lines that run regent (also as `kubectl regent` or
// inside `<(…)`), continuation lines joined, words split as a shell would, cut where a pipe or
// redirection starts.
func exampleCommands(example string) [][]string {
	var lines []string
	var cont string
	for _, l := range strings.Split(example, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, `\`) {
			cont += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		lines, cont = append(lines, cont+l), ""
	}
	var out [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "#") {
			continue
		}
		words := shellWords(strings.ReplaceAll(l, "<(", "<( "))
		for i, w := range words {
			if w == "regent" && (i == 0 || words[i-1] == "kubectl" || words[i-1] == "<(" || strings.Contains(words[i-1], "=")) {
				var cmd []string
				for _, a := range words[i:] {
					if a != "" && strings.ContainsAny(a[:1], "|><);&") {
						break
					}
					if end, closed := strings.CutSuffix(a, ")"); closed {
						cmd = append(cmd, end)
						break
					}
					cmd = append(cmd, a)
				}
				out = append(out, cmd)
				break
			}
		}
	}
	return out
}

// shellWords splits a line into words, honouring single and double quotes.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	in, quote, started := false, byte(0), false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, started = c, true
		case c == ' ' || c == '\t':
			if in || started {
				words = append(words, w.String())
				w.Reset()
			}
			in, started = false, false
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in || started {
		words = append(words, w.String())
	}
	return words
}

// parseExample parses an example's words with a fresh command tree as cobra would before running
// it, and returns the path of the command it runs.
func parseExample(words []string) (string, error) {
	root := newRootCommand()
	cmd, rest, err := root.Find(words[1:])
	if err != nil {
		return "", err
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return "", err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return "", err
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return "", err
	}
	return cmd.CommandPath(), nil
}

func TestExampleCommands_FindRegentInWhatATerminalRuns(t *testing.T) {
	cases := []struct {
		example string
		want    [][]string
	}{
		{"  # a comment naming regent status\n  regent status -o json", [][]string{{"regent", "status", "-o", "json"}}},
		{"  kubectl regent status --context c1", [][]string{{"regent", "status", "--context", "c1"}}},
		{"  COSIGN_PASSWORD=... regent policy push a.wasm r:v1 --key k", [][]string{{"regent", "policy", "push", "a.wasm", "r:v1", "--key", "k"}}},
		{"  regent policy run -p x \\\n    --settings '{\"a\": [1]}' -r y", [][]string{{"regent", "policy", "run", "-p", "x", "--settings", `{"a": [1]}`, "-r", "y"}}},
		{"  source <(regent completion bash)", [][]string{{"regent", "completion", "bash"}}},
		{"  regent verify -o json dir > report.json", [][]string{{"regent", "verify", "-o", "json", "dir"}}},
		{"  kubectl get ns -o yaml > objects.yaml", nil},
		{"  regent version --settings=''", [][]string{{"regent", "version", "--settings="}}},
	}
	for _, c := range cases {
		got := exampleCommands(c.example)
		if len(got) != len(c.want) {
			t.Errorf("%q: got %q, want %q", c.example, got, c.want)
			continue
		}
		for i := range got {
			if strings.Join(got[i], "\x00") != strings.Join(c.want[i], "\x00") {
				t.Errorf("%q: got %q, want %q", c.example, got[i], c.want[i])
			}
		}
	}
	// And the check catches what drifts: an unknown flag, a missing required flag, extra arguments.
	for _, bad := range [][]string{
		{"regent", "hub", "--no-such-flag"},
		{"regent", "dryrun", "objects.yaml"},
		{"regent", "version", "extra"},
		{"regent", "policy", "pull", "a", "b"},
	} {
		if _, err := parseExample(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
