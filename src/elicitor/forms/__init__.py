"""Elicitation forms: the spec's restricted schema subset as typed fields, built from Python types or schemas."""

from ._annotations import Choices, Email, Field, Uri
from ._fields import (
    BooleanField,
    EnumField,
    FormField,
    MultiEnumField,
    NumberField,
    Option,
    StringField,
)
from ._form import Form
from ._types import SINGLE_FIELD

__all__ = [
    "SINGLE_FIELD",
    "BooleanField",
    "Choices",
    "Email",
    "EnumField",
    "Field",
    "Form",
    "FormField",
    "MultiEnumField",
    "NumberField",
    "Option",
    "StringField",
    "Uri",
]
