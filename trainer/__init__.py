"""Step 3 of TRACE: one LoRA adapter per capability, trained with group-by-seed GRPO."""
