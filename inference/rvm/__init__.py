"""Hand-written RVM backends: em, fast, vb, gibbs."""
