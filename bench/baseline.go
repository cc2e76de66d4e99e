package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/guest"
)

// tickerScript redraws a counter in place about every 10 ms without forking
// (bash's read -t on a FIFO nobody writes is a sleep), so that every capture
// sees a frame it has not seen before and must encode it: the same load on
// the baseline display and in the Shinken sandbox.
const tickerScript = `f=$(mktemp -u);mkfifo $f;exec 3<>$f;rm $f;i=0;while :;do i=$((i+1));printf '\r%010d' $i;read -t 0.01 -u 3;done`

// Baseline is the common harness's way to step a desktop: xdotool and scrot
// as subprocesses against a plain Xvfb display (1280x800x24, openbox, an
// xterm redrawing a counter) that Baseline starts itself.
type Baseline struct {
	// Warning says what was not as intended (the xterm never mapped), for
	// the report; empty when all is well.
	Warning string
	display string
	dir     string
	procs   []*exec.Cmd
}

// BaselineTools are the binaries the baseline needs on PATH.
var BaselineTools = []string{"Xvfb", "openbox", "xterm", "xdotool", "scrot", "bash"}

// StartBaseline starts Xvfb on a free display with openbox and one xterm at
// the geometry Shinken's tasks use, running tickerScript, and waits until the
// xterm's window is mapped. Close ends everything it started.
func StartBaseline(ctx context.Context) (_ *Baseline, err error) {
	for _, t := range BaselineTools {
		if _, err := exec.LookPath(t); err != nil {
			return nil, fmt.Errorf("baseline needs %s: %w", t, err)
		}
	}
	dir, err := os.MkdirTemp("", "shinken-bench-baseline-")
	if err != nil {
		return nil, err
	}
	bl := &Baseline{dir: dir}
	defer func() {
		if err != nil {
			bl.Close()
		}
	}()
	if bl.display, err = bl.startXvfb(ctx); err != nil {
		return nil, err
	}
	if err := bl.start("openbox"); err != nil {
		return nil, err
	}
	// The xterm starts once openbox manages the screen: an xterm mapped
	// while openbox is still starting could stay unmapped, unframed.
	wmctx, wmcancel := context.WithTimeout(ctx, 20*time.Second)
	err = guest.AwaitWM(wmctx, bl.display)
	wmcancel()
	if err != nil {
		return nil, fmt.Errorf("baseline: %w (logs: %s)", err, bl.logs())
	}
	if err := bl.start("xterm", "-geometry", "100x30+0+0", "-e", "bash", "-c", tickerScript); err != nil {
		return nil, err
	}
	// The baseline steps work whether or not the xterm is up; waiting for
	// it keeps the captured screen comparable with the sandbox's. On a
	// starved machine the wait gives up rather than failing the run.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		search := exec.CommandContext(wctx, "xdotool", "search", "--onlyvisible", "--class", "xterm")
		search.Env = bl.env()
		out, _ := search.Output()
		if len(strings.TrimSpace(string(out))) > 0 {
			return bl, nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			bl.Warning = fmt.Sprintf("xterm not mapped on %s after 20s; stepping anyway (logs: %s)", bl.display, bl.logs())
			return bl, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startXvfb starts Xvfb on a free display from a high range, away from the
// low numbers that test sessions let Xvfb pick, retrying the next number when
// one turns out taken.
func (bl *Baseline) startXvfb(ctx context.Context) (string, error) {
	var last error
	for n := 700 + os.Getpid()%50; n < 800; n++ {
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", n)); err == nil {
			continue
		}
		d, err := bl.startXvfbOn(ctx, n)
		if err == nil {
			return d, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("baseline: no free display: %w", last)
}

// startXvfbOn starts Xvfb on display n; -displayfd tells when it accepts
// connections.
func (bl *Baseline) startXvfbOn(ctx context.Context, n int) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer r.Close()
	cmd := exec.Command("Xvfb", ":"+strconv.Itoa(n), "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp", "-noreset")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		w.Close()
		return "", fmt.Errorf("baseline: start Xvfb: %w", err)
	}
	w.Close()
	bl.procs = append(bl.procs, cmd)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case s := <-got:
		if _, err := strconv.Atoi(s); err != nil {
			return "", fmt.Errorf("baseline: Xvfb reported no display (%q)", s)
		}
		return ":" + s, nil
	case <-time.After(15 * time.Second):
		return "", errors.New("baseline: Xvfb did not report a display within 15s")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start runs a long-lived client of the baseline display.
func (bl *Baseline) start(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = bl.env()
	cmd.Dir = bl.dir
	if f, err := os.Create(filepath.Join(bl.dir, name+".log")); err == nil {
		cmd.Stdout, cmd.Stderr = f, f
		defer f.Close() // the child holds its own copy
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("baseline: start %s: %w", name, err)
	}
	bl.procs = append(bl.procs, cmd)
	return nil
}

// logs returns the tail of each client's output, for error messages.
func (bl *Baseline) logs() string {
	var parts []string
	for _, name := range []string{"openbox", "xterm"} {
		b, _ := os.ReadFile(filepath.Join(bl.dir, name+".log"))
		if len(b) > 300 {
			b = b[len(b)-300:]
		}
		parts = append(parts, fmt.Sprintf("%s: %q", name, strings.TrimSpace(string(b))))
	}
	return strings.Join(parts, "; ")
}

func (bl *Baseline) env() []string {
	return append(os.Environ(), "DISPLAY="+bl.display, "HOME="+bl.dir)
}

// Display returns the baseline's X display, e.g. ":3".
func (bl *Baseline) Display() string { return bl.display }

// Step does what many harnesses do per step: `xdotool mousemove X Y click 1`
// then `scrot -o shot.png`, each a subprocess, and returns the PNG's size.
func (bl *Baseline) Step(ctx context.Context, x, y int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	click := exec.CommandContext(ctx, "xdotool", "mousemove", strconv.Itoa(x), strconv.Itoa(y), "click", "1")
	click.Env = bl.env()
	if out, err := click.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("baseline: xdotool: %w: %s", err, out)
	}
	shot := filepath.Join(bl.dir, "shot.png")
	scrot := exec.CommandContext(ctx, "scrot", "-o", shot)
	scrot.Env = bl.env()
	if out, err := scrot.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("baseline: scrot: %w: %s", err, out)
	}
	st, err := os.Stat(shot)
	if err != nil {
		return 0, fmt.Errorf("baseline: scrot wrote nothing: %w", err)
	}
	return int(st.Size()), nil
}

// Close ends every process the baseline started (newest first; SIGTERM so
// that Xvfb removes its socket and lock, SIGKILL after a second), waits for
// them and removes its directory.
func (bl *Baseline) Close() {
	for i := len(bl.procs) - 1; i >= 0; i-- {
		cmd := bl.procs[i]
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	bl.procs = nil
	os.RemoveAll(bl.dir)
}
