package hosttools

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// read_file's limits (llama-server's SERVER_TOOL_READ_FILE_MAX_SIZE and
// _MAX_SIZE_BASE64).
const (
	readMaxText   = 16 << 10
	readMaxBase64 = 32 << 20
)

func readFileTool() *Tool {
	return &Tool{Name: "read_file", Display: "Read file",
		desc: "Read the contents of a file. Optionally specify a 1-based line range. " +
			"If append_loc is true, each line is prefixed with its line number (e.g. \"1\u2192...\").",
		props: []prop{
			{"path", "string", "Path to the file"},
			{"start_line", "integer", "First line to read, 1-based (default: 1)"},
			{"end_line", "integer", "Last line to read, 1-based inclusive (default: end of file)"},
			{"append_loc", "boolean", "Prefix each line with its line number"},
		},
		req: []string{"path"}, run: readFile}
}

func readFile(ctx context.Context, c *call) (map[string]any, error) {
	path, err := c.p.str("path", true, "")
	if err != nil {
		return nil, err
	}
	start, err := c.p.integer("start_line", 1)
	if err != nil {
		return nil, err
	}
	end, err := c.p.integer("end_line", -1)
	if err != nil {
		return nil, err
	}
	loc, err := c.p.boolean("append_loc", false)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(resolve(c.cwd, path))
	if err != nil {
		return fail("cannot stat file: %s", path), nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		return fail("failed to open file: %s", path), nil
	}
	size := st.Size()
	if c.base64 {
		if size > readMaxBase64 {
			return fail("file too large (%d bytes, max %d)", size, readMaxBase64), nil
		}
		b, err := io.ReadAll(io.LimitReader(f, readMaxBase64+1))
		if err != nil || len(b) > readMaxBase64 {
			return fail("failed to open file: %s", path), nil
		}
		return map[string]any{"base64": base64.StdEncoding.EncodeToString(b), "size_bytes": len(b)}, nil
	}
	if size > readMaxText && end == -1 {
		return fail("file too large (%d bytes, max %d). Use start_line/end_line to read a portion.", size, readMaxText), nil
	}
	text, err := readLines(ctx, bufio.NewReader(f), start, end, loc)
	if err != nil {
		return fail("failed to open file: %s", path), nil
	}
	return map[string]any{"plain_text_response": text}, nil
}

// readLines is read_file's loop: lines start..end (end -1: to the end of
// the file), each ended by "\n" and prefixed "N→" with loc, until one more
// would pass readMaxText ("[output truncated]"). A line is read only as far
// as it could be kept; the file only as far as the last line returned.
func readLines(ctx context.Context, r *bufio.Reader, start, end int, loc bool) (string, error) {
	var out []byte
	for n := 1; end == -1 || n <= end; n++ {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		line, ok, err := nextLine(r, n >= start, readMaxText+1)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if n < start {
			continue
		}
		if loc {
			line = append([]byte(strconv.Itoa(n)+"\u2192"), line...)
		}
		line = append(line, '\n')
		if len(out)+len(line) > readMaxText {
			return string(out) + "[output truncated]", nil
		}
		out = append(out, line...)
	}
	return string(out), nil
}

// nextLine reads one line (without its "\n"), keeping at most max bytes of
// it when keep (none otherwise); ok is false at the end of the file.
func nextLine(r *bufio.Reader, keep bool, max int) (line []byte, ok bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if len(frag) > 0 {
			ok = true
		}
		if keep && len(line) < max {
			line = append(line, frag[:min(len(frag), max-len(line))]...)
		}
		switch {
		case err == nil:
			if keep && len(line) > 0 && line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			return line, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return line, ok, nil
		default:
			return nil, false, err
		}
	}
}

func writeFileTool() *Tool {
	return &Tool{Name: "write_file", Display: "Write file", Write: true,
		desc: "Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_file for more complex edits.",
		props: []prop{
			{"path", "string", "Path of the file to write"},
			{"content", "string", "Content to write"},
		},
		req: []string{"path", "content"}, run: writeFile}
}

func writeFile(_ context.Context, c *call) (map[string]any, error) {
	path, err := c.p.str("path", true, "")
	if err != nil {
		return nil, err
	}
	content, err := c.p.str("content", true, "")
	if err != nil {
		return nil, err
	}
	if err := writeAll(resolve(c.cwd, path), content); err != nil {
		return fail("failed to write file: %s", path), nil
	}
	return map[string]any{"result": "file written successfully", "path": path, "bytes": len(content)}, nil
}

// writeAll writes a file, creating its parent directories.
func writeAll(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}
