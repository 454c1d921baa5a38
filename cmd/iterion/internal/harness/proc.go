package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one child process of the harness. It runs in its own process
// group, so a signal reaches everything it started; its stdout and stderr are
// kept in files under the harness's directory for diagnosis. A proc is safe
// for concurrent use.
type proc struct {
	name    string
	cmd     *exec.Cmd
	stdout  string // path of the captured stdout
	stderr  string // path of the captured stderr
	from    int64  // the stderr file's length when this process started
	done    chan struct{}
	waitErr error       // set before done closes
	first   chan string // the first stdout line, once
}

// startProc starts bin with args, capturing stdout and stderr in dir as
// name.stdout and name.stderr (appended, so a restarted process keeps its
// history). A second copy of stdout is scanned for the first line, which
// waitLine returns.
func startProc(dir, name, bin string, args ...string) (*proc, error) {
	p := &proc{
		name:   name,
		stdout: filepath.Join(dir, name+".stdout"),
		stderr: filepath.Join(dir, name+".stderr"),
		done:   make(chan struct{}),
		first:  make(chan string, 1),
	}
	outFile, err := os.OpenFile(p.stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProcess, name, err)
	}
	errFile, err := os.OpenFile(p.stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		outFile.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrProcess, name, err)
	}
	if fi, err := errFile.Stat(); err == nil {
		p.from = fi.Size()
	}
	pr, pw := io.Pipe()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = io.MultiWriter(outFile, pw)
	p.cmd.Stderr = errFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		outFile.Close()
		errFile.Close()
		return nil, fmt.Errorf("%w: start %s: %w", ErrProcess, name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case p.first <- strings.TrimSpace(sc.Text()):
			default:
			}
		}
		io.Copy(io.Discard, pr) // keep the writer unblocked after a long line
	}()
	go func() {
		p.waitErr = p.cmd.Wait()
		pw.Close()
		outFile.Close()
		errFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitLine returns the process's first stdout line, or an error when the
// process exits or timeout passes first.
func (p *proc) waitLine(timeout time.Duration) (string, error) {
	select {
	case line := <-p.first:
		return line, nil
	case <-p.done:
		if p.waitErr != nil {
			return "", fmt.Errorf("%w: %s exited before printing its address: %w; see %s", ErrProcess, p.name, p.waitErr, p.stderr)
		}
		return "", fmt.Errorf("%w: %s exited before printing its address; see %s", ErrProcess, p.name, p.stderr)
	case <-time.After(timeout):
		return "", fmt.Errorf("%w: %s printed nothing in %v; see %s", ErrProcess, p.name, timeout, p.stderr)
	}
}

// signal sends sig to the process's whole group. A process that has exited
// is not an error.
func (p *proc) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: signal %s: %w", ErrProcess, p.name, err)
	}
	return nil
}

// wait waits for the process to exit, at most timeout; it reports whether it
// did.
func (p *proc) wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop asks the process to exit with SIGTERM and kills its group when it has
// not exited within grace. It returns once the process has exited.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// stderrPath is the path of the file its stderr is captured in.
func (p *proc) stderrPath() string { return p.stderr }

// pid is the process's id, its group's too.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logged reports whether this process (not an earlier one of its name)
// wrote s to its stderr.
func (p *proc) logged(s string) bool {
	b, err := os.ReadFile(p.stderr)
	return err == nil && int64(len(b)) >= p.from && strings.Contains(string(b[p.from:]), s)
}

// tail returns the last n lines of the process's stderr, for error messages.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The commands the harness runs, as packages of the module.
const (
	iterionPkg  = "./cmd/iterion"
	devMongoPkg = "./cmd/dev-mongo"
)

// build compiles the command pkg (iterionPkg, devMongoPkg) of the module
// rooted at root into out.
func build(ctx context.Context, root, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go build %s: %w\n%s", ErrBuild, pkg, err, b)
	}
	return nil
}

// ModuleRoot returns the directory of the go.mod that encloses dir.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no go.mod above %q", ErrBuild, dir)
		}
	}
}
