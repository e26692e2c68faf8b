package toolcall

import (
	"fmt"
	"strings"
)

// MiniMax-M2 writes its calls as XML invocations inside one block:
//
//	<minimax:tool_call>
//	<invoke name="NAME">
//	<parameter name="KEY">value</parameter>
//	</invoke>
//	</minimax:tool_call>
//
// (its chat_template.jinja, and llama.cpp's tests/test-chat.cpp at
// 3f545becc, which reads it through the template-derived parser).
const (
	mmCallsBegin = "<minimax:tool_call>"
	mmCallsEnd   = "</minimax:tool_call>"
	mmInvoke     = `<invoke name="`
	mmInvokeEnd  = "</invoke>"
	mmParam      = `<parameter name="`
	mmParamEnd   = "</parameter>"
)

// parseMiniMaxM2 reads every <invoke> of every <minimax:tool_call> block;
// a parameter's value is a string where the tool's schema says so, else
// JSON when it parses as JSON.
func parseMiniMaxM2(text string, tools []Tool) (string, []Call, error) {
	content, blocks, err := between(text, mmCallsBegin, mmCallsEnd)
	if err != nil {
		return "", nil, err
	}
	var calls []Call
	for _, blk := range blocks {
		_, invokes, err := between(blk, mmInvoke, mmInvokeEnd)
		if err != nil {
			return "", nil, err
		}
		if len(invokes) == 0 {
			return "", nil, fmt.Errorf("%w: %s without %s…%s", ErrCall, mmCallsBegin, mmInvoke, mmInvokeEnd)
		}
		for _, inv := range invokes {
			name, body, ok := strings.Cut(inv, `">`)
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				return "", nil, fmt.Errorf("%w: %s%s: want a name and \">\"", ErrCall, mmInvoke, clip(inv))
			}
			args, err := xmlParams(body, mmParam, `">`, mmParamEnd, propTypes(tools, name))
			if err != nil {
				return "", nil, err
			}
			calls = append(calls, Call{Name: name, Arguments: args})
		}
	}
	return content, calls, nil
}
