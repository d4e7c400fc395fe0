"""What the test modules share (test modules never import one another):

- `models`: small models and tokenizers built in memory; `engines`: a scripted policy;
  `chat_templates`: three model families' chat templates; `trajectories`: episodes made
  by hand;
- `runs`: run files, run configs and command lines of a few small steps; `ranks`: two CPU
  ranks under torchrun; `repo`: the checkout's root, benches and the outside reference;
- `checks`: comparable forms of golden data, timings, an interrupted stream;
- stand-ins the tests run against: `rollout_server_fakes` (loopback SGLang and vLLM
  servers), `mcp_server` (a stdio MCP server), `view_runs` (run folders with dumped
  episodes) and `browser` (`agentrl view`'s page in headless Chromium).
"""
