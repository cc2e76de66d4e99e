package guest

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"github.com/shinken-rl/shinken/aci"
)

// Identity is a uid and gid that processes run as.
type Identity struct {
	UID, GID int
}

// distinct reports whether id is set and differs from guestd's own
// identity: only then does running as it need (and get) a credential change.
func (id *Identity) distinct() bool {
	return id != nil && id.UID >= 0 && id.UID != os.Geteuid()
}

// credential makes cmd run as id, with no supplementary groups.
func (id *Identity) credential(cmd *exec.Cmd) {
	if !id.distinct() {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(id.UID), Gid: uint32(id.GID), Groups: []uint32{}}
}

// startError types a failure to start a program the agent asked for: a
// missing or non-executable program is the agent's invalid action, running
// out of processes (its own fork bomb under its RLIMIT_NPROC) is an
// agent_error, anything else the guest's.
func startError(what, prog string, err error) error {
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return aci.Errorf(aci.CodeAgentError, "%s: start %s: out of processes: %v", what, prog, err)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission), errors.Is(err, exec.ErrNotFound):
		return aci.Errorf(aci.CodeInvalidAction, "%s: start %s: %v", what, prog, err)
	}
	return aci.Errorf(aci.CodeInternal, "%s: start %s: %v", what, prog, err)
}
