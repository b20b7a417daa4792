# The PyTorch side of bench_data's augmentation figure: torch.utils.data.DataLoader with torchvision's transforms
# (RandomCrop(32, padding=4), RandomHorizontalFlip, ConvertImageDtype(float32), Normalize) over 50,000 uint8
# 3x32x32 images held as one tensor, batch 128, shuffled, on 0, 1 and 2 worker processes (persistent), one compute
# thread. Median of 3 epochs, samples/s. Run with Debian's interpreter: /usr/bin/python3 bench/torch_data.py
import statistics
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Augmented(Dataset):
    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]


def main():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (50000, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (50000,), generator=g)
    transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                           T.ConvertImageDtype(torch.float32),
                           T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    ds = Augmented(images, labels, transform)
    print(f"torch {torch.__version__}, torchvision transforms, 1 compute thread")
    for workers in (0, 1, 2):
        loader = DataLoader(ds, batch_size=128, shuffle=True, num_workers=workers,
                            persistent_workers=workers > 0)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            for x, y in loader:
                pass
            times.append(time.perf_counter() - t0)
        print(f"{workers} workers {50000 / statistics.median(times):10.0f} samples/s")


if __name__ == "__main__":
    main()
