"""A stand-in for verl in the tests (verl, torch and its model servers do not
run here). See verl/experimental/agent_loop/agent_loop.py."""
