"""Step 1 of TRACE: contrastive capability analysis of passed and failed trajectories."""
