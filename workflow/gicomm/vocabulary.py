"""The transports and NIC backends gicomm names: read from the one list the native code compiles
too (config/vocabulary.def, X-macro lines), so Python and C++ never disagree."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gicomm import CONFIG_DIR
from gicomm.errors import ConfigError

VOCABULARY_FILE = CONFIG_DIR / "vocabulary.def"

_BACKEND = re.compile(r'^GICOMM_NIC_BACKEND\((\w+),\s*"([^"]+)",\s*"([^"]*)"\)\s*$')
_TRANSPORT = re.compile(r'^GICOMM_TRANSPORT\((\w+),\s*"([^"]+)",\s*(\w+),\s*"([^"]*)"\)\s*$')


@dataclass(frozen=True)
class Vocabulary:
    nic_backends: dict[str, str]  # name -> what executes the work requests
    transports: dict[str, str]  # name -> its default NIC backend (a name)


def parse(text: str, where: Path | str) -> Vocabulary:
    backends: dict[str, str] = {}
    ids: dict[str, str] = {}
    transports: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        if m := _BACKEND.match(line):
            ids[m[1]] = m[2]
            backends[m[2]] = m[3]
        elif m := _TRANSPORT.match(line):
            if m[3] not in ids:
                raise ConfigError(
                    f"{where}:{lineno}: default backend {m[3]!r} is not declared above"
                )
            transports[m[2]] = ids[m[3]]
        else:
            raise ConfigError(
                f"{where}:{lineno}: not a GICOMM_NIC_BACKEND or GICOMM_TRANSPORT line"
            )
    return Vocabulary(nic_backends=backends, transports=transports)


@functools.cache
def vocabulary() -> Vocabulary:
    return parse(VOCABULARY_FILE.read_text(), VOCABULARY_FILE)


def transports() -> list[str]:
    return list(vocabulary().transports)


def nic_backends() -> list[str]:
    return list(vocabulary().nic_backends)


def default_nic_backend(transport: str) -> str:
    return vocabulary().transports[transport]
