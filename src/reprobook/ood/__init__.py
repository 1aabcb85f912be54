"""Out-of-distribution detection: post-hoc scores of a trained classifier and their metrics.

``scores``: the logit- and feature-based baselines (MSP, max-logit, energy, kNN);
``weiper``: WeiPer's perturbed class projections and its two scores (WeiPer+MSP, WeiPer+KLD);
``metrics``: AUROC and FPR at 95% TPR, in-distribution as the positive class.
Every score follows one convention: **higher means more in-distribution**.
"""
