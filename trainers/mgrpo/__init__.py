"""M-GRPO (DESIGN.md §6): hierarchical advantages, trajectory alignment, decoupled trainers."""
