"""Stand-ins the tests run against: loopback rollout servers, written runs."""
