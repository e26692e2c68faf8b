package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Media parts of a chat message (image_url, input_audio, input_video), as
// llama-server 3f545becc's oaicompat_chat_params_parse and handle_media
// read them. pipe serves text models only, so every media part ends in
// llama-server's answer for a model without vision or audio ("image input
// is not supported - hint: …"); what pipe does first is the part of
// handle_media that concerns the server, not the model: a file:// URL names
// a file under Options.MediaPath (llama-server's --media-path; without it,
// "file:// URLs are not allowed unless --media-path is specified"), checked
// with llama-server's fs_validate_filename (no "..", no ':' '*' '?' '"' '<'
// '>' '|', no control characters, at most 255 bytes) and then opened
// confined to the directory (os.OpenInRoot: a symbolic link that leads out
// of it is refused too, which llama-server does not check), so a forbidden
// or missing file is the same 400 as on llama-server with a vision model.
// The file is opened and its size checked, never read: nothing would use
// its bytes. http(s) URLs are not fetched (llama-server downloads them for
// a vision model only) and data: URLs are not decoded.
//
// Differences: llama-server tells a text model's image input apart first,
// with a 500 (its runtime_error); pipe checks the file first and answers
// 400 (the request, not the server, is at fault).

// maxMediaBytes is the largest local media file accepted, as llama-server's
// limit on a downloaded image (10 MiB).
const maxMediaBytes = 10 << 20

// mediaRef is one media part of a chat: which message and part, its kind
// ("image", "audio", "video") and its URL or data.
type mediaRef struct {
	msg, part int
	kind, url string
}

// mediaPartType is the content part type of each media kind.
var mediaPartType = map[string]string{"image": "image_url", "audio": "input_audio", "video": "input_video"}

// ErrMediaPath marks a file:// media URL that --media-path does not allow
// or that names no readable file.
var ErrMediaPath = errors.New("media file")

// checkMedia checks a chat's media parts against the media directory dir
// ("" when --media-path is not set) and answers the first with its error:
// the file's, else a text model's.
func checkMedia(dir string, refs []mediaRef) error {
	for _, m := range refs {
		where := fmt.Sprintf("messages[%d].content[%d] (%s)", m.msg, m.part, mediaPartType[m.kind])
		if rest, ok := strings.CutPrefix(m.url, "file://"); ok {
			if err := openMedia(dir, rest); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrRequest, where, err)
			}
		}
		return badRequest("%s: %s input is not supported - hint: if this is unexpected, you may need to provide the mmproj (pipe serve runs text models only)", where, m.kind)
	}
	return nil
}

// openMedia opens the file name (a file:// URL's path) under dir, confined
// to it, and checks it is a regular file of at most maxMediaBytes.
func openMedia(dir, name string) error {
	if dir == "" {
		return fmt.Errorf("%w: file:// URLs are not allowed unless --media-path is specified", ErrMediaPath)
	}
	if !validMediaName(name) {
		return fmt.Errorf("%w: file path is not allowed: %s", ErrMediaPath, name)
	}
	// llama-server appends the path to --media-path (which ends in a
	// separator): leading and doubled slashes name the same file
	rel := filepath.Clean(strings.TrimLeft(name, "/"))
	f, err := os.OpenInRoot(dir, rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: file does not exist or cannot be opened: %s", ErrMediaPath, name)
		}
		return fmt.Errorf("%w: file path is not allowed or cannot be opened: %s", ErrMediaPath, name)
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil || !st.Mode().IsRegular():
		return fmt.Errorf("%w: file does not exist or cannot be opened: %s", ErrMediaPath, name)
	case st.Size() > maxMediaBytes:
		return fmt.Errorf("%w: %s: %d bytes, over the %d-byte limit", ErrMediaPath, name, st.Size(), maxMediaBytes)
	}
	return nil
}

// validMediaName is llama.cpp's fs_validate_filename(name, allow_subdirs
// true): a UTF-8 path of 1..255 bytes without control characters, the
// characters Windows forbids (but '/' and '\'), look-alikes of '.', '/' and
// '\', U+FFFD or a BOM; no leading or trailing space, no trailing '.', no
// "..", not ".".
func validMediaName(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) {
		return false
	}
	for _, c := range name {
		switch {
		case c <= 0x1f, c == 0x7f, c >= 0x80 && c <= 0x9f,
			c == 0xff0e, c == 0x2215, c == 0x2216, c == 0xfffd, c == 0xfeff,
			strings.ContainsRune(`:*?"<>|`, c):
			return false
		}
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' || name[len(name)-1] == '.' {
		return false
	}
	return !strings.Contains(name, "..") && name != "."
}
