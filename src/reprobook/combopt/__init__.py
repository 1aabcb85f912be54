"""Combinatorial optimisation: districting instances, routing costs, set partitioning, the
capacitated minimum spanning tree (CMST), perturbed Fenchel-Young losses and the DistrictNet
pipeline built from them."""
