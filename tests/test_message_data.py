"""The TypedDicts the projector, history, lowering and runner handle stored messages with mirror the public message
models key for key: a field renamed, added or made optional in one place and not the other fails here."""

from __future__ import annotations

import types
import typing

import pytest
from pydantic import BaseModel

from opencode_session.schema import common, message, prompt
from opencode_session.schema import message_data as md

PAIRS: list[tuple[type, type[BaseModel]]] = [
    (md.ModelRefData, common.ModelRef),
    (md.SessionErrorInfoData, common.SessionErrorInfo),
    (md.TokenCacheData, common.TokenCache),
    (md.TokensData, common.Tokens),
    (md.PromptSourceData, prompt.PromptSource),
    (md.PromptFileAttachmentData, prompt.PromptFileAttachment),
    (md.PromptAgentAttachmentData, prompt.PromptAgentAttachment),
    (md.CreatedTimeData, message.CreatedTime),
    (md.CompletedTimeData, message.CompletedTime),
    (md.SessionMessageUserData, message.SessionMessageUser),
    (md.SessionMessageSyntheticData, message.SessionMessageSynthetic),
    (md.SessionMessageSystemData, message.SessionMessageSystem),
    (md.SessionMessageAgentSwitchedData, message.SessionMessageAgentSwitched),
    (md.SessionMessageModelSwitchedData, message.SessionMessageModelSwitched),
    (md.SessionMessageShellData, message.SessionMessageShell),
    (md.SessionMessageCompactionData, message.SessionMessageCompaction),
    (md.ToolTextContentData, message.ToolTextContent),
    (md.ToolFileContentData, message.ToolFileContent),
    (md.ToolStateStreamingData, message.ToolStateStreaming),
    (md.ToolStateRunningData, message.ToolStateRunning),
    (md.ToolStateCompletedData, message.ToolStateCompleted),
    (md.ToolStateErrorData, message.ToolStateError),
    (md.ToolProviderData, message.ToolProvider),
    (md.ToolTimeData, message.ToolTime),
    (md.SessionMessageAssistantTextData, message.SessionMessageAssistantText),
    (md.SessionMessageAssistantReasoningData, message.SessionMessageAssistantReasoning),
    (md.SessionMessageAssistantToolData, message.SessionMessageAssistantTool),
    (md.RetryStateData, message.RetryState),
    (md.AssistantSnapshotData, message.AssistantSnapshot),
    (md.SessionMessageAssistantData, message.SessionMessageAssistant),
]


def _may_be_none(annotation: object) -> bool:
    """Whether the model may hold None here, i.e. the key is omitted from the wire form (exclude_none)."""
    if annotation is typing.Any:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _may_be_none(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return False


@pytest.mark.parametrize(("data", "model"), PAIRS, ids=[model.__name__ for _, model in PAIRS])
def test_each_typed_dict_has_the_keys_of_its_model_and_omits_exactly_what_may_be_none(data, model):
    fields = {info.alias or name: info.annotation for name, info in model.model_fields.items()}
    assert set(data.__required_keys__) == {k for k, a in fields.items() if not _may_be_none(a)}
    assert set(data.__optional_keys__) == {k for k, a in fields.items() if _may_be_none(a)}


def test_every_message_model_has_its_typed_dict():
    mirrored = {model for _, model in PAIRS}
    union = typing.get_args(typing.get_args(message.SessionMessage)[0])
    assert set(union) <= mirrored
    data_union = typing.get_args(md.SessionMessageData)
    assert len(data_union) == len(union)
