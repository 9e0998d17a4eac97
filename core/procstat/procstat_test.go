package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestStates(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := Read(os.Getpid()); !ok || p.State != 'R' || p.PPID != os.Getppid() || p.StartTicks == 0 || p.RSSPages <= 0 {
		t.Errorf("Read(self) = %+v %v, want state R, parent %d, a start time and resident pages", p, ok, os.Getppid())
	}
	if !Alive(os.Getpid()) {
		t.Error("Alive(self) = false")
	}
	found := false
	for _, pid := range PIDsOf(self) {
		found = found || pid == os.Getpid()
	}
	if !found {
		t.Errorf("PIDsOf(%s) does not list this process", self)
	}

	// An exited child that is not reaped yet is a zombie: not alive.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, ok := Read(cmd.Process.Pid)
		if ok && p.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie (state %c)", cmd.Process.Pid, p.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Alive(cmd.Process.Pid) {
		t.Error("Alive(zombie) = true")
	}
	if _, ok := Read(1 << 30); ok {
		t.Error("Read of a pid that cannot exist: ok")
	}
}
