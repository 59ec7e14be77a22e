"""A Kubernetes Secret written whole into a line the log sources read as text: an API server's
audit Event (`--audit-log-path`) in a file read as `plain` or `syslog`, a ClickHouse `Body`, an
operator's or a controller's log of the object it applied. `jsonl` reads an audit Event as a
record (`kubeaudit`); read as text, its Secret's `data` and `stringData` (base64 or plain values
under names of the owner's choosing, which no secret's name rule knows) were shown.

- A line holding a Secret (`"kind":"Secret"`, a `SecretList`) or an audit Event about one
  (`"resource":"secrets"`): its JSON, from the first `{` to the last `}`, is read; each Secret
  (the object itself, a list's items, an Event's `requestObject` and `responseObject`) keeps
  its `kind`, `apiVersion`, `type`, `immutable` and `metadata` but annotations (kubectl's
  last-applied-configuration annotation is a copy of the whole Secret); every other value is
  `***`, as `kubeaudit` masks a record's fields. The JSON is written again compact, or with
  `", "` and `": "` when the line had them.
- A line that is no JSON there (cut short by a store's bound, a JSON string inside another):
  from the first member that may hold a Secret's values (`data`, `stringData`, `items`,
  `requestObject`, `responseObject`, `annotations`) to the end is `***`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from workers.masking import MASK

__all__ = ["SHOWN", "mask_secret_object", "without_secret_objects"]

# A Secret's parts that say what it is, not what it holds
SHOWN: Final = frozenset({"kind", "apiVersion", "type", "immutable"})
# (a quote may be escaped as JSON inside JSON writes it: `\"kind\":\"Secret\"`)
_SECRET: Final = re.compile(
    r'\\*+"(?:kind\\*+"\s*+:\s*+\\*+"Secret(?:List)?|resource\\*+"\s*+:\s*+\\*+"secrets)\\*+"'
)
_HOLDER: Final = re.compile(
    r'\\*+"(?:data|stringData|items|requestObject|responseObject|annotations)\\*+"\s*+:'
)
_OBJECTS: Final = ("requestObject", "responseObject")


def without_secret_objects(text: str) -> str:
    """The text with the values a Kubernetes Secret holds as `***` (module docstring)."""
    if _SECRET.search(text) is None:
        return text
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            whole = json.loads(text[start : end + 1])
            held = isinstance(whole, dict) and _mask_whole(whole)
        except (ValueError, RecursionError):  # (a hostile depth: masked to the end, below)
            whole, held = None, True
        if isinstance(whole, dict):
            if not held:
                return text
            spaced = '": ' in text[start : end + 1]
            written = json.dumps(
                whole, ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":")
            )
            return text[:start] + written + text[end + 1 :]
    holder = _HOLDER.search(text)
    return text if holder is None else text[: holder.end()] + MASK


def _mask_whole(whole: dict[str, Any]) -> bool:
    """Mask in place the Secrets a parsed line holds; whether it held one."""
    kind = whole.get("kind")
    if kind in ("Secret", "SecretList"):
        mask_secret_object(whole)
        return True
    ref = whole.get("objectRef")
    about = isinstance(ref, dict) and ref.get("resource") == "secrets"
    found = False
    for name in _OBJECTS:
        part = whole.get(name)
        if isinstance(part, (dict, list)) and (
            about or (isinstance(part, dict) and part.get("kind") in ("Secret", "SecretList"))
        ):
            mask_secret_object(part)
            found = True
    return found


def mask_secret_object(part: Any) -> None:
    """Mask in place every value of a Secret (or a list of them, a patch) but what says what it
    is: `SHOWN`, and `metadata` but its annotations."""
    items = part.items() if isinstance(part, dict) else enumerate(part)
    for key, value in list(items):
        if isinstance(value, (dict, list)):
            if key == "metadata" and isinstance(value, dict):
                annotations = value.get("annotations")
                if isinstance(annotations, dict):
                    _mask_leaves(annotations)
            else:
                mask_secret_object(value)
        elif key not in SHOWN and value is not None and value != "":
            part[key] = MASK


def _mask_leaves(part: Any) -> None:
    items = part.items() if isinstance(part, dict) else enumerate(part)
    for key, value in list(items):
        if isinstance(value, (dict, list)):
            _mask_leaves(value)
        elif value is not None and value != "":
            part[key] = MASK
