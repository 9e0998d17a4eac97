package main

import (
	"os"
	"os/exec"
	"strconv"

	"github.com/hashicorp/go-plugin"

	"github.com/unyo-ops/unyo/plugins/base"
)

// newCmd is the plugin's command line as the host starts it.
func newCmd(bin, sockDir string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), base.EnvParentPID+"="+strconv.Itoa(os.Getpid()), plugin.EnvUnixSocketDir+"="+sockDir)
	return cmd
}
