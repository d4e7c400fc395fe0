"""The tool server of examples/verifiers_letters.py: a verifiers ``Toolset`` (an MCP server
verifiers starts for each episode)."""

from __future__ import annotations

import verifiers.v1 as vf


class LettersToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "letters"

    @vf.tool
    def count(self, word: str, letter: str) -> int:
        """How many times ``letter`` occurs in ``word``."""
        return word.count(letter)


if __name__ == "__main__":
    LettersToolset.run()
