import numpy as np
import pytest

from bnstudy import data
from bnstudy.data import files as realdata


def test_star2d_labels_alternate_by_arm():
    ds = data.make("star2d", {"n_train": 300, "n_test": 100, "n_arms": 6, "noise": 0.0})
    x, y = ds.x_train, ds.y_train
    angle = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    arm = np.rint(angle / (2 * np.pi / 6)).astype(int) % 6
    assert np.array_equal(y, arm % 2)
    assert ds.task == "classification" and ds.input_shape == (2,) and ds.out_dim == 2
    r = np.linalg.norm(x, axis=1)
    assert r.min() >= 0.1 - 1e-6 and r.max() <= 1.0 + 1e-6


def test_star2d_rejects_odd_arms():
    with pytest.raises(ValueError, match="even"):
        data.make("star2d", {"n_arms": 5})


def test_gaussian_linear_is_exactly_linear():
    ds = data.make("gaussian_linear", {"n_train": 200, "n_test": 50, "dim": 10, "seed": 3})
    a, *_ = np.linalg.lstsq(ds.x_train, ds.y_train, rcond=None)
    assert np.allclose(ds.x_test @ a, ds.y_test, atol=1e-3)
    assert ds.x_train.shape == (200, 10) and ds.task == "regression" and ds.out_dim == 10
    assert abs(ds.x_train.std() - 1) < 0.1


def test_same_seed_same_data_other_seed_other_data():
    a = data.make("gaussian_linear", {"seed": 1})
    b = data.make("gaussian_linear", {"seed": 1})
    c = data.make("gaussian_linear", {"seed": 2})
    assert np.array_equal(a.x_train, b.x_train) and not np.array_equal(a.x_train, c.x_train)


def test_digits_stratified_split(digits):
    assert digits.input_shape == (1, 8, 8)
    assert len(digits.x_train) + len(digits.x_test) == 1797
    frac = np.bincount(digits.y_test, minlength=10) / len(digits.y_test)
    assert np.all(np.abs(frac - 0.1) < 0.02)
    flat = data.make("digits", {"image": False})
    assert flat.input_shape == (64,)


def test_image_sets_are_standardized_per_channel_by_the_training_split(digits, tmp_path):
    """Default: the training split has per-channel mean 0 and std 1, the test split is mapped
    with the same (training) statistics; ``standardize: false`` gives the [0, 1] pixels; both
    recorded in the dataset's meta."""
    raw = data.make("digits", {"standardize": False})
    assert raw.meta["standardized"] is False and "channel_mean" not in raw.meta
    assert 0 <= raw.x_train.min() and raw.x_train.max() <= 1
    assert raw.x_train.mean() == pytest.approx(0.305, abs=0.01)  # the old values
    assert np.mean(raw.x_train == 0) > 0.45  # half the pixels are background at exactly 0
    assert digits.meta["standardized"] is True
    assert abs(digits.x_train.mean()) < 1e-5 and digits.x_train.std() == pytest.approx(1, abs=1e-5)
    mean, std = digits.meta["channel_mean"][0], digits.meta["channel_std"][0]
    assert mean == pytest.approx(raw.x_train.mean(dtype=np.float64), rel=1e-6)
    np.testing.assert_allclose(digits.x_test, (raw.x_test - mean) / std, atol=1e-5)
    assert not np.any(digits.x_train == 0)
    assert data.make("digits", {"image": False}).meta["standardized"] is True
    data.save(digits, tmp_path / "d.npz")
    assert data.load(tmp_path / "d.npz").meta["standardized"] is True
    assert data.check_options("digits", {})["standardize"] is True
    with pytest.raises(data.BadOption, match="standardize='yes'.*true or false"):
        data.check_options("mnist", {"standardize": "yes"})
    with pytest.raises(data.BadOption, match="standardize"):
        data.check_options("star2d", {"standardize": True})


def test_unknown_kind_and_bad_options_are_named():
    with pytest.raises(ValueError, match="unknown dataset kind 'mnsit'.*valid choices.*mnist"):
        data.make("mnsit")
    with pytest.raises(ValueError, match="bad options for dataset 'star2d'"):
        data.make("star2d", {"n_arm": 4})


def test_roundtrip(tmp_path, star):
    data.save(star, tmp_path / "s.npz")
    back = data.load(tmp_path / "s.npz")
    assert np.array_equal(back.x_train, star.x_train) and back.meta == star.meta
    assert not list(tmp_path.glob(".*tmp*")), "atomic write left a temporary file"


def test_real_datasets_offline_error_says_where(tmp_path):
    with pytest.raises(realdata.DataUnavailable, match=str(tmp_path / "mnist")):
        data.make("mnist", {"data_dir": str(tmp_path)})
    with pytest.raises(realdata.DataUnavailable, match="cifar-10-batches-bin"):
        data.make("cifar10", {"data_dir": str(tmp_path)})


def _write_idx(path, arr):
    arr = np.asarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(d.to_bytes(4, "big") for d in arr.shape)
    path.write_bytes(header + arr.tobytes())


def test_mnist_reader_on_local_files(tmp_path):
    root = tmp_path / "mnist"
    root.mkdir()
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (5, 28, 28))
    for stem, arr in (("train-images-idx3-ubyte", imgs), ("t10k-images-idx3-ubyte", imgs[:2]),
                      ("train-labels-idx1-ubyte", [0, 1, 2, 3, 4]),
                      ("t10k-labels-idx1-ubyte", [7, 8])):
        _write_idx(root / stem, arr)
    ds = data.make("mnist", {"data_dir": str(tmp_path), "standardize": False})
    assert ds.input_shape == (1, 28, 28) and ds.x_train.shape == (5, 784)
    assert np.allclose(ds.x_train[0], imgs[0].ravel() / 255.0)
    assert list(ds.y_test) == [7, 8]
    std = data.make("mnist", {"data_dir": str(tmp_path), "n_train": 4})  # stats of those 4
    assert abs(std.x_train.mean()) < 1e-5 and std.x_train.std() == pytest.approx(1, abs=1e-4)
    assert std.meta["standardized"] is True


def test_cifar_reader_on_local_files(tmp_path):
    batches = tmp_path / "cifar10" / "cifar-10-batches-bin"
    batches.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in realdata.CIFAR_TRAIN + realdata.CIFAR_TEST:
        rec = np.concatenate([rng.integers(0, 10, (4, 1)), rng.integers(0, 256, (4, 3072))], 1)
        rec.astype(np.uint8).tofile(batches / name)
    ds = data.make("cifar10", {"data_dir": str(tmp_path), "n_train": 10})
    assert ds.x_train.shape == (10, 3072) and ds.input_shape == (3, 32, 32)
    per_channel = ds.x_train.reshape(10, 3, 1024)
    np.testing.assert_allclose(per_channel.mean(axis=(0, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(per_channel.std(axis=(0, 2)), 1, atol=1e-4)
    raw = data.make("cifar10", {"data_dir": str(tmp_path), "n_train": 10, "standardize": False})
    assert 0 <= raw.x_train.min() and raw.x_train.max() <= 1 and not raw.meta["standardized"]
    np.testing.assert_allclose(raw.x_train.reshape(10, 3, 1024).mean(axis=(0, 2)), 0.5, atol=0.05)
