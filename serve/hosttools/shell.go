package hosttools

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// exec_shell_command's and get_info's limits (llama-server's).
const (
	shellMaxOut     = 16 << 10
	shellMaxTimeout = 60
	shellDefTimeout = 10
	infoMaxOut      = 4096
	infoTimeout     = 5 * time.Second
)

func shellTool() *Tool {
	return &Tool{Name: "exec_shell_command", Display: "Execute shell command", Write: true, Stream: true,
		desc: "Execute a shell command and return its output (stdout and stderr combined).",
		props: []prop{
			{"command", "string", "Shell command to execute"},
			{"timeout", "integer", fmt.Sprintf("Timeout in seconds (default 10, max %d)", shellMaxTimeout)},
			{"max_output_size", "integer", fmt.Sprintf("Maximum output size in bytes (default %d)", shellMaxOut)},
		},
		req: []string{"command"}, run: shell}
}

func shell(ctx context.Context, c *call) (map[string]any, error) {
	command, err := c.p.str("command", true, "")
	if err != nil {
		return nil, err
	}
	timeout, err := c.p.integer("timeout", shellDefTimeout)
	if err != nil {
		return nil, err
	}
	maxOut, err := c.p.integer("max_output_size", shellMaxOut)
	if err != nil {
		return nil, err
	}
	timeout, maxOut = min(timeout, shellMaxTimeout), min(maxOut, shellMaxOut)
	if maxOut < 0 { // llama-server reads it as a size_t: a huge one, then capped
		maxOut = shellMaxOut
	}
	res := run(ctx, []string{"sh", "-c", command}, c.cwd, maxOut, time.Duration(max(timeout, 0))*time.Second, c.emit)
	tail := fmt.Sprintf("\n[exit code: %d]", res.exitCode)
	if res.timedOut {
		tail += " [exit due to timed out]"
	}
	if c.emit != nil {
		if ctx.Err() == nil {
			c.emit(tail)
		}
		return nil, nil
	}
	return map[string]any{"plain_text_response": res.output + tail}, nil
}

func getInfoTool() *Tool {
	return &Tool{Name: "get_info", Display: "Get Runtime Info",
		desc: "Returns runtime info: the OS name/version and the current working directory",
		run:  getInfo}
}

func getInfo(ctx context.Context, c *call) (map[string]any, error) {
	res := run(ctx, []string{"uname", "-a"}, c.cwd, infoMaxOut, infoTimeout, nil)
	osInfo := "unknown"
	if res.exitCode == 0 && !res.timedOut {
		osInfo = strings.TrimSpace(res.output)
	}
	cwd := c.cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	return map[string]any{"os": osInfo, "cwd": cwd}, nil
}
