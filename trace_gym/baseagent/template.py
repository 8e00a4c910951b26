"""The tiny agent's chat template: Qwen's turn markers and hermes tool calls, with a compact
tool list (one line per tool: its name and argument names) so that system prompt and tools
stay within a few hundred tokens. Assistant turns are wrapped in `{% generation %}` so that
`apply_chat_template(..., return_assistant_tokens_mask=True)` marks the tokens that get loss.
Consecutive tool results share one user turn, as in Qwen's template.
"""

CHAT_TEMPLATE = (
    "{%- set ns = namespace(start=0) -%}"
    "<|im_start|>system\n"
    "{%- if messages and messages[0].role == 'system' %}{{ '\\n' + messages[0].content }}{% set ns.start = 1 %}{% endif %}"
    "{%- if tools %}{{ '\\n\\n# Tools' }}"
    "{%- for tool in tools %}{{ '\\n- ' + tool.function.name + '(' + (tool.function.parameters.properties | list | join(', ')) + ')' }}{% endfor %}"
    "{{ '\\nCall a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.' }}"
    "{%- endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{%- for message in messages[ns.start:] %}"
    "{%- set i = ns.start + loop.index0 %}"
    "{%- if message.role == 'user' %}"
    "{{ '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{%- if message.content %}{{ message.content }}{% endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{{ '<tool_call>{\"name\": \"' + call.function.name + '\", \"arguments\": ' }}"
    "{%- if call.function.arguments is string %}{{ call.function.arguments }}{% else %}{{ call.function.arguments | tojson }}{% endif %}"
    "{{ '}</tool_call>' }}"
    "{%- endfor %}"
    "{{ '<|im_end|>' }}"
    "{%- endgeneration %}"
    "{{ '\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if i == 0 or messages[i - 1].role != 'tool' %}{{ '<|im_start|>user\\n' }}{% endif %}"
    "{{ '<tool_response>' + message.content + '</tool_response>' }}"
    "{%- if i + 1 == messages | length or messages[i + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>"]
EOS = "<|im_end|>"
PAD = "<|endoftext|>"
