"""Intent is an enum whose values are what stores hold: a stored message reads back as the enum,
and an intent this version does not know is one clear error."""

from __future__ import annotations

import json
import pickle

import pytest
from pydantic import ValidationError
from support.pool import make_message

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.messages import Intent, Message, UnknownIntentError
from critiquelab.runtime.pool.store import check_where, from_record, to_record


def test_an_intent_is_its_stored_string() -> None:
    message = make_message(intent="output.complete")
    assert message.intent is Intent.OUTPUT_COMPLETE
    assert message.intent == "output.complete" and f"{message.intent}" == "output.complete"
    assert json.loads(message.model_dump_json())["intent"] == "output.complete"
    _, _, record = to_record(message)
    assert type(record["intent"]) is str and record["intent"] == "output.complete"


def test_a_stored_record_reads_back_as_the_enum() -> None:
    message = make_message(intent=Intent.SCRATCHPAD_UPDATE, summary="s", content="c")
    record_id, document, record = to_record(message)
    back = from_record(record_id, document, record)
    assert back == message and back.intent is Intent.SCRATCHPAD_UPDATE


def test_an_unknown_stored_intent_is_one_clear_error() -> None:
    record_id, document, record = to_record(make_message())
    with pytest.raises(UnknownIntentError, match=r"stored message .*unknown intent 'gossip'") as raised:
        from_record(record_id, document, {**record, "intent": "gossip"})
    assert isinstance(raised.value, UserError) and "critique" in str(raised.value)


def test_a_logged_message_with_an_unknown_intent_is_refused_by_validation() -> None:
    line = make_message().model_dump_json().replace('"critique"', '"gossip"')
    with pytest.raises(ValidationError, match="intent"):
        Message.model_validate_json(line)


def test_filters_hold_an_intent_as_its_plain_value() -> None:
    where = check_where({"intent": Intent.CRITIQUE})
    assert type(where["intent"]) is str and where["intent"] == "critique"


def test_the_unknown_intent_error_crosses_a_process_boundary() -> None:
    record_id, document, record = to_record(make_message())
    with pytest.raises(UnknownIntentError) as raised:
        from_record(record_id, document, {**record, "intent": "gossip"})
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is UnknownIntentError and str(again) == str(raised.value)
