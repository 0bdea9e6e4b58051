"""Every C header generated from Python (foxc.cgen), in one list: tools/build_cubins.py regenerates
them before a build and `--check` refuses stale ones."""
from __future__ import annotations

from .cgen import GeneratedHeader
from .agent import layout as agent
from .data import features, record
from .isv import header as isv
from .lobsim import layout as lobsim
from .nn import layout as nn
from .replay import layout as replay


def all_headers() -> list[GeneratedHeader]:
    return [isv.HEADER, record.HEADER, features.HEADER, agent.HEADER, lobsim.HEADER, nn.HEADER, replay.HEADER]
