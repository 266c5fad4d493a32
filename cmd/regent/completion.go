package main

import "github.com/spf13/cobra"

// addHelpAndCompletion adds cobra's help and completion commands now rather than when the root
// executes, so they carry examples like every other command, and marks them tools: they print
// for the user and log no start line.
func addHelpAndCompletion(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	examples := map[string]string{
		"help": `  regent help status rollout`,
		"completion": `  # bash, in this shell
  source <(regent completion bash)
  # as a kubectl plugin, kubectl completes "kubectl regent …" through kubectl_complete-regent
  ln -s "$(command -v regent)" /usr/local/bin/kubectl_complete-regent`,
		"bash":       `  regent completion bash > /etc/bash_completion.d/regent`,
		"zsh":        `  regent completion zsh > "${fpath[1]}/_regent"`,
		"fish":       `  regent completion fish > ~/.config/fish/completions/regent.fish`,
		"powershell": `  regent completion powershell | Out-String | Invoke-Expression`,
	}
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			continue
		}
		tool(c)
		c.Example = examples[c.Name()]
		for _, shell := range c.Commands() {
			shell.Example = examples[shell.Name()]
		}
	}
}
