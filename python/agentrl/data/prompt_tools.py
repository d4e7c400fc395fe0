"""The tools each prompt of the pool offers: its own ``tools`` field read, then the pool's
defaults, forcing, allow-list and calculator alias applied.

Prompts with identical tools share one resolved list (datasets repeat the same tools on
every line), which keeps a large pool small; treat ``sample.tools`` as read-only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentrl.data.samples import SkipRecord
from agentrl.tools.schema import (
    ToolSchemaError,
    append_calculator_alias,
    merged_tool_names,
    normalize_tool_schema,
    parse_tool_schema,
    resolve_tool_specs,
    tool_name_set,
)


@dataclass(kw_only=True, eq=False)
class PromptTools:
    """Reads and resolves prompts' tools under the pool's tool options (see `PromptPool`)."""

    default_tools: list[dict[str, Any]]
    force_all_tools: bool
    allowed_tools: set[str]
    augment_calculator_alias: bool
    registered_tools: Mapping[str, dict[str, Any]]
    lenient: bool
    _cache: dict[str, tuple[Any, dict[str, bool]]] = field(
        default_factory=dict, init=False, repr=False
    )

    def read(self, value: Any) -> list[dict[str, Any]] | None:
        """A ``tools``/``functions`` field as specs; a bad one skips the record (``bad_tools``)."""
        value = self._with_registered(value)
        if self.lenient:
            return normalize_tool_schema(value)
        try:
            return parse_tool_schema(value)
        except ToolSchemaError as exc:
            raise SkipRecord("bad_tools", str(exc)) from None

    def _with_registered(self, value: Any) -> Any:
        """A tools list whose entries that only name a registered tool get its spec."""
        if not self.registered_tools or not isinstance(value, list):
            return value
        out = []
        for item in value:
            name = item if isinstance(item, str) else None
            if isinstance(item, dict):
                inner = item.get("function") if isinstance(item.get("function"), dict) else item
                if "parameters" not in inner and isinstance(inner.get("name"), str):
                    name = inner["name"]
            spec = self.registered_tools.get(name) if name is not None else None
            out.append(json.loads(json.dumps(spec)) if spec is not None else item)
        return out

    def resolve(
        self, tools: list[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]] | None, dict[str, bool]]:
        """The tools a prompt offers after defaults, forcing, the allow-list and the alias.

        Returns the shared resolved list and, by counter name, what resolving did to it
        (``defaulted_tools``, ``forced_default_tools``, ``augmented_calculator_alias``: the
        pool counts them per prompt).
        """
        key = "null" if tools is None else json.dumps(tools, ensure_ascii=False, default=str)
        cached = self._cache.get(key)
        if cached is None:
            allowed = set(self.allowed_tools) if self.allowed_tools else None
            alias = self.augment_calculator_alias
            own_count = len(merged_tool_names(tools, None, alias, allowed))
            default_count = len(merged_tool_names(self.default_tools, None, alias, allowed))
            resolved = resolve_tool_specs(
                tools, self.default_tools, self.force_all_tools, alias, allowed
            )
            resolved_count = len(tool_name_set(resolved))
            flags = {
                "defaulted_tools": own_count <= 0 < default_count and resolved_count > 0,
                "forced_default_tools": self.force_all_tools and resolved_count > own_count,
                "augmented_calculator_alias": False,
            }
            if alias:
                had_alias = "calculator" in tool_name_set(resolved)
                resolved = append_calculator_alias(resolved)
                flags["augmented_calculator_alias"] = (
                    not had_alias and "calculator" in tool_name_set(resolved)
                )
            if len(self._cache) >= 4096:
                self._cache.clear()
            cached = (resolved, flags)
            self._cache[key] = cached
        return cached


__all__ = ["PromptTools"]
