"""The learning-rate schedule."""
import torch

from a2c_ppo_acktr import utils


def test_linear_schedule():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    assert utils.update_linear_schedule(opt, 0, 4, 1.0) == 1.0
    assert utils.update_linear_schedule(opt, 3, 4, 1.0) == 0.25
    assert opt.param_groups[0]["lr"] == 0.25
