"""Step 4 of TRACE: composing capability adapters (task routing, gated mixture of LoRA experts)."""
