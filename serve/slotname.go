package serve

// slotname.go: the files of POST /slots/{id}?action=save|restore. A name is
// checked as llama-server's fs_validate_filename (common.cpp, without
// subdirectories) checks it, and the file is opened through an os.Root of
// --slot-save-path, so that neither the name nor a symbolic link in the
// directory reaches outside it. A save writes a temporary file in the
// directory and renames it over the name; it replaces only a regular file
// that is itself a sequence state file (its first word the 'ggsq' magic:
// pipe's saves, and llama-server's, which llama-server would overwrite as
// well), never another file. A restore opens only a regular file.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"
)

// errSlotName: a slot file name llama-server's check refuses, or a file
// the action must not touch.
var errSlotName = errors.New("Invalid filename")

// validSlotFile is llama-server's fs_validate_filename(name, false): at
// most 255 bytes of valid, shortest-form UTF-8 without control characters,
// path separators, Windows' reserved characters or their Unicode look-
// alikes, surrogates, U+FFFD or a BOM; no leading or trailing space, no
// trailing dot, no "..", not ".".
func validSlotFile(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) { // Go's decoder refuses overlong forms and surrogates
		return false
	}
	for _, c := range name {
		if c <= 0x1f || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0xff0e || c == 0x2215 || c == 0x2216 ||
			c == 0xfffd || c == 0xfeff || strings.ContainsRune(`:*?"<>|/\`, c) {
			return false
		}
	}
	return name[0] != ' ' && name[len(name)-1] != ' ' && name[len(name)-1] != '.' && !strings.Contains(name, "..") && name != "."
}

// slotSeqMagic is the first word of a sequence state file ('ggsq').
const slotSeqMagic = 0x67677371

// openSlotFile opens name in dir for a restore: a regular file only.
func openSlotFile(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if fi, err := root.Stat(name); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: %w", name, errSlotName)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file: %w", name, errSlotName)
	}
	return f, nil
}

// writeSlotFile writes name in dir with write, through a temporary file
// renamed over it; an existing name must be a sequence state file.
func writeSlotFile(dir, name string, write func(io.Writer) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := replaceable(root, name); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := fmt.Sprintf(".pipe-slot-%x.tmp", rnd)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(tmp) // after the rename: nothing to remove
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return root.Rename(tmp, name)
}

// replaceable: name does not exist, or is a regular file that starts with
// the sequence state file's magic.
func replaceable(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file, not replaced: %w", name, errSlotName)
	}
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	var magic uint32
	if err := binary.Read(f, binary.LittleEndian, &magic); err != nil || magic != slotSeqMagic {
		return fmt.Errorf("%s exists and is not a slot save file (no 'ggsq' magic), not replaced: %w", name, errSlotName)
	}
	return nil
}
