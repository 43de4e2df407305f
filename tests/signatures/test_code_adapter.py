"""CodeAdapter: code-only roles converse in plain code blocks; other roles are ChatAdapter's."""

import dspy

from critiquelab.signatures import Coder, Critic, Fixer
from critiquelab.signatures.adapter import CodeAdapter, is_code_signature


def test_which_signatures_are_code_only():
    assert is_code_signature(Coder) and is_code_signature(Fixer)
    assert not is_code_signature(Critic)


def test_code_role_messages_and_parse():
    adapter = CodeAdapter()
    demo = {"prompt": "def f():\n", "code": "def f():\n    return 1"}
    messages = adapter.format(Coder, [demo], {"prompt": "def g():\n"})
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert Coder.instructions.splitlines()[0] in messages[0]["content"]
    assert "[[ ##" not in "".join(m["content"] for m in messages)
    assert messages[2]["content"] == "```python\ndef f():\n    return 1\n```"
    assert messages[3]["content"] == "prompt:\n```python\ndef g():\n```"
    reply = "Sure.\n```python\ndef g():\n    return 2\n```\nExample:\n```python\nprint(g())\n```"
    assert adapter.parse(Coder, reply) == {"code": "def g():\n    return 2"}
    assert adapter.parse(Coder, "def g(): return 3") == {"code": "def g(): return 3"}


def test_other_roles_keep_chat_adapter_format():
    adapter, chat = CodeAdapter(), dspy.ChatAdapter()
    inputs = {"prompt": "p", "code": "c", "execution_feedback": "none"}
    assert adapter.format(Critic, [], inputs) == chat.format(Critic, [], inputs)
