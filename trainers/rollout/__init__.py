"""Episodes played through a generator: tree-structured best-of-N and independent rollouts, samples
keyed by (problem, agent, turn), and the credit each role's samples carry."""
