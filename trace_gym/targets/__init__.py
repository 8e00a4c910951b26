"""The built-in target envs: whole customer-service tasks on the airline and retail worlds."""
