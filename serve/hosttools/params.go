package hosttools

import (
	"encoding/json"
	"fmt"
)

// params are a call's parameters; a getter answers the default for an
// absent or null one and ErrParam naming it for one of the wrong type.
type params map[string]json.RawMessage

func (p params) get(name string, v any) (bool, error) {
	raw, ok := p[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%w: params.%s: want %s", ErrParam, name, kindOf(v))
	}
	return true, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case *string:
		return "a string"
	case *int:
		return "an integer"
	case *bool:
		return "true or false"
	}
	return "an array of {old_text, new_text}"
}

// str is a string parameter; required makes its absence an ErrParam.
func (p params) str(name string, required bool, def string) (string, error) {
	s := def
	ok, err := p.get(name, &s)
	if err == nil && !ok && required {
		err = fmt.Errorf("%w: params.%s is required", ErrParam, name)
	}
	return s, err
}

func (p params) integer(name string, def int) (int, error) {
	n := def
	_, err := p.get(name, &n)
	return n, err
}

func (p params) boolean(name string, def bool) (bool, error) {
	b := def
	_, err := p.get(name, &b)
	return b, err
}

// errParamf is an ErrParam with its message.
func errParamf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrParam, fmt.Sprintf(format, a...))
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
