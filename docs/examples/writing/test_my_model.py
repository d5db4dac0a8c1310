"""An ordinary test function using the fixtures: no YAML needed."""

import torch
from torch.utils.data import DataLoader


def test_my_model(bench, synthetic_images):
    data = synthetic_images(n=64, image_size=16, num_classes=4)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in bench.iterate(DataLoader(data, batch_size=8)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        bench.log_loss(loss)
    assert bench.observations == 8
