import itertools

import numpy as np
import pytest
import torch

from reprobook.vision.boxes import (box_area, box_iou, cxcywh_to_xyxy, hungarian, match_boxes,
                                    xyxy_to_cxcywh)


def test_conversions_round_trip():
    b = torch.tensor([[1.0, 2.0, 4.0, 6.0], [0.0, 0.0, 0.5, 0.25]])
    assert torch.allclose(cxcywh_to_xyxy(xyxy_to_cxcywh(b)), b)
    assert torch.allclose(box_area(b), torch.tensor([12.0, 0.125]))


def test_iou_known_values():
    a = torch.tensor([[0.0, 0.0, 2.0, 2.0]])
    b = torch.tensor([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 2.0], [5.0, 5.0, 6.0, 6.0], [0.0, 0.0, 2.0, 1.0]])
    assert torch.allclose(box_iou(a, b), torch.tensor([[1 / 7, 1.0, 0.0, 0.5]]))


def test_iou_against_pixel_count():
    g = torch.Generator().manual_seed(0)
    xy = torch.randint(0, 20, (6, 2), generator=g).float()
    wh = torch.randint(1, 12, (6, 2), generator=g).float()
    boxes = torch.cat([xy, xy + wh], 1)
    grid = torch.zeros(6, 40, 40, dtype=torch.bool)
    for i, (x1, y1, x2, y2) in enumerate(boxes.long().tolist()):
        grid[i, y1:y2, x1:x2] = True
    iou = box_iou(boxes, boxes)
    for i, j in itertools.product(range(6), range(6)):
        inter = (grid[i] & grid[j]).sum().item()
        union = (grid[i] | grid[j]).sum().item()
        assert iou[i, j].item() == pytest.approx(inter / union, abs=1e-6)


def test_hungarian_is_optimal_by_brute_force():
    rng = np.random.default_rng(1)
    cost = rng.random((4, 4))
    rows, cols = hungarian(cost)
    best = min(sum(cost[i, p[i]] for i in range(4)) for p in itertools.permutations(range(4)))
    assert cost[rows, cols].sum() == pytest.approx(best)


def test_match_boxes_threshold_and_permutation():
    gt = torch.tensor([[0.0, 0.0, 2.0, 2.0], [10.0, 10.0, 12.0, 12.0], [20.0, 0.0, 22.0, 2.0]])
    pred = torch.stack([gt[2] + 0.1, gt[0], gt[1] + 5.0])     # third is far from everything
    rows, cols, ious = match_boxes(pred, gt, iou_threshold=0.5)
    assert sorted(zip(rows.tolist(), cols.tolist())) == [(0, 2), (1, 0)]
    assert (ious >= 0.5).all()


def test_bad_inputs_named():
    with pytest.raises(ValueError, match="last dimension of 4"):
        box_iou(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="non-finite"):
        hungarian(np.array([[np.inf, 1.0]]))
    with pytest.raises(ValueError, match="iou_threshold"):
        match_boxes(torch.zeros(1, 4), torch.zeros(1, 4), iou_threshold=2)
