"""The pieces the RL trainer loop (`agentrl.trainer`) calls, one concern per module."""
