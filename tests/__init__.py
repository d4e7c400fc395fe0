"""The test suite: one folder of test modules per layer, and `tests.fakes`, what they share."""
