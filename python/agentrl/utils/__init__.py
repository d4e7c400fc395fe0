"""Small helpers shared by otherwise unrelated parts of agentrl (no heavy imports here)."""
