"""CIFAR-100 and SVHN loaders (and the CIFAR archives' checksums) on small files in the real
formats, written by the tests: binary CIFAR records, tar.gz archives, SVHN format-2 .mat files."""

import hashlib
import io
import tarfile

import numpy as np
import pytest
from scipy.io import savemat

from bnstudy import data
from bnstudy.data import files as realdata

RNG = np.random.default_rng(0)


def _images(n):
    return RNG.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)


def _cifar100_records(coarse, fine, imgs):
    head = np.stack([coarse, fine], 1).astype(np.uint8)
    return np.concatenate([head, imgs.reshape(len(imgs), -1)], 1).tobytes()


def _write_cifar100(folder, n_train=6, n_test=3):
    folder.mkdir(parents=True, exist_ok=True)
    labels = {}
    for name, n in (("train.bin", n_train), ("test.bin", n_test)):
        coarse, fine = RNG.integers(0, 20, n), RNG.integers(0, 100, n)
        (folder / name).write_bytes(_cifar100_records(coarse, fine, _images(n)))
        labels[name] = coarse, fine
    return labels


def _svhn_mat(path, imgs, digits):
    """``imgs`` (N, 3, 32, 32) as format 2's X (32, 32, 3, N); digit 0 stored as label 10."""
    y = np.where(np.asarray(digits) == 0, 10, digits).astype(np.uint8)[:, None]
    savemat(path, {"X": imgs.transpose(2, 3, 1, 0), "y": y})


def _md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def _trust(monkeypatch, *paths):
    """Make the test's own files the 'official' ones (their MD5s replace the published ones)."""
    for p in paths:
        monkeypatch.setitem(realdata.MD5, p.name, _md5(p))


def _tarball(path, folder, names):
    with tarfile.open(path, "w:gz") as tf:
        for n in names:
            tf.add(folder / n, arcname=f"{folder.name}/{n}")


def test_cifar100_fine_and_coarse_labels_from_the_binary_files(tmp_path):
    labels = _write_cifar100(tmp_path / "cifar100" / "cifar-100-binary")
    fine = data.make("cifar100", {"data_dir": str(tmp_path)})
    assert fine.input_shape == (3, 32, 32) and fine.out_dim == 100
    assert fine.x_train.shape == (6, 3072) and fine.x_test.shape == (3, 3072)
    assert list(fine.y_train) == list(labels["train.bin"][1])
    assert list(fine.y_test) == list(labels["test.bin"][1])
    coarse = data.make("cifar100", {"data_dir": str(tmp_path), "label": "coarse", "n_train": 4})
    assert coarse.out_dim == 20 and len(coarse.y_train) == 4
    assert set(coarse.y_train) <= set(labels["train.bin"][0])
    assert data.shape("cifar100", {"label": "coarse"}) == (coarse.input_shape, coarse.out_dim)
    assert data.shape("cifar100", {}) == (fine.input_shape, fine.out_dim)
    per_channel = fine.x_train.reshape(6, 3, 1024)
    assert np.allclose(per_channel.mean(axis=(0, 2)), 0, atol=1e-5)
    assert np.allclose(per_channel.std(axis=(0, 2)), 1, atol=1e-4)


def test_cifar100_label_option_is_checked():
    with pytest.raises(data.BadOption, match="label='medium'.*one of fine, coarse"):
        data.check_options("cifar100", {"label": "medium"})
    with pytest.raises(data.BadOption, match="label"):
        data.check_options("cifar10", {"label": "fine"})


def test_cifar100_archive_is_extracted_after_its_checksum(tmp_path, monkeypatch):
    src = tmp_path / "src" / "cifar-100-binary"
    _write_cifar100(src)
    archive = tmp_path / "cifar100" / "cifar-100-binary.tar.gz"
    archive.parent.mkdir()
    _tarball(archive, src, ["train.bin", "test.bin"])
    with pytest.raises(realdata.CorruptData, match=f"{archive}.*official 03b5dce0"):
        data.make("cifar100", {"data_dir": str(tmp_path)})  # not the official archive
    assert not (tmp_path / "cifar100" / "cifar-100-binary").exists(), "extracted unverified"
    _trust(monkeypatch, archive)
    ds = data.make("cifar100", {"data_dir": str(tmp_path)})
    assert ds.x_train.shape == (6, 3072) and (tmp_path / "cifar100/cifar-100-binary").is_dir()


def test_cifar10_archive_checksum_is_verified(tmp_path):
    src = tmp_path / "src" / "cifar-10-batches-bin"
    src.mkdir(parents=True)
    for name in realdata.CIFAR_TRAIN + realdata.CIFAR_TEST:
        rec = np.concatenate([RNG.integers(0, 10, (2, 1)), RNG.integers(0, 256, (2, 3072))], 1)
        (src / name).write_bytes(rec.astype(np.uint8).tobytes())
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    _tarball(archive, src, realdata.CIFAR_TRAIN + realdata.CIFAR_TEST)
    with pytest.raises(realdata.CorruptData, match="official c32a1d4a"):
        data.make("cifar10", {"data_dir": str(tmp_path)})


def test_cifar100_records_are_checked(tmp_path):
    folder = tmp_path / "cifar100" / "cifar-100-binary"
    _write_cifar100(folder)
    whole = (folder / "train.bin").read_bytes()
    (folder / "train.bin").write_bytes(whole[:-100])
    with pytest.raises(realdata.CorruptData, match="train.bin.*whole number of 3074-byte"):
        data.make("cifar100", {"data_dir": str(tmp_path)})
    (folder / "train.bin").write_bytes(_cifar100_records([3], [100], _images(1)))
    with pytest.raises(realdata.CorruptData, match="label byte 1 .* 100 classes"):
        data.make("cifar100", {"data_dir": str(tmp_path)})


def test_svhn_from_format_2_files(tmp_path, monkeypatch):
    root = tmp_path / "svhn"
    root.mkdir()
    imgs, digits = _images(12), np.arange(12) % 10
    _svhn_mat(root / "train_32x32.mat", imgs[:8], digits[:8])
    _svhn_mat(root / "test_32x32.mat", imgs[8:], digits[8:])
    x, y = realdata.read_svhn_mat(root / "train_32x32.mat")  # label 10 is digit 0
    assert list(y) == list(digits[:8]) and x.shape == (8, 3072)
    assert np.allclose(x, imgs[:8].reshape(8, -1) / 255.0)  # channel-major, like CIFAR
    _trust(monkeypatch, root / "train_32x32.mat", root / "test_32x32.mat")
    ds = data.make("svhn", {"data_dir": str(tmp_path), "n_test": 3})
    assert ds.input_shape == (3, 32, 32) and ds.out_dim == 10 and ds.x_test.shape == (3, 3072)
    assert list(ds.y_train) == list(digits[:8]) and set(ds.y_test) <= {8, 9, 0, 1}
    assert np.allclose(ds.x_train.reshape(8, 3, 1024).mean(axis=(0, 2)), 0, atol=1e-5)
    assert data.shape("svhn", {}) == (ds.input_shape, ds.out_dim)


def test_svhn_same_image_reads_as_cifar(tmp_path):
    img = _images(1)
    _svhn_mat(tmp_path / "a.mat", img, [4])
    (tmp_path / "a.bin").write_bytes(_cifar100_records([0], [4], img))
    xs, ys = realdata.read_svhn_mat(tmp_path / "a.mat")
    xc, yc = realdata.read_cifar_bin(tmp_path / "a.bin", (20, 100), 1)
    assert np.array_equal(xs, xc) and list(ys) == list(yc) == [4]


def test_svhn_checksum_and_structure_are_checked(tmp_path, monkeypatch):
    root = tmp_path / "svhn"
    root.mkdir()
    for name in realdata.SVHN_FILES:
        _svhn_mat(root / name, _images(2), [1, 10])
    with pytest.raises(realdata.CorruptData, match="train_32x32.mat has MD5 .*official e26dedcc"):
        data.make("svhn", {"data_dir": str(tmp_path)})
    savemat(root / "train_32x32.mat", {"X": np.zeros((32, 32, 2), np.uint8), "y": [[1]]})
    _trust(monkeypatch, *(root / n for n in realdata.SVHN_FILES))
    with pytest.raises(realdata.CorruptData, match=r"not SVHN format 2.*\(32, 32, 2\)"):
        data.make("svhn", {"data_dir": str(tmp_path)})
    savemat(root / "train_32x32.mat", {"X": _images(1).transpose(2, 3, 1, 0), "y": [[0]]})
    _trust(monkeypatch, root / "train_32x32.mat")
    with pytest.raises(realdata.CorruptData, match="labels must be 1..10"):
        data.make("svhn", {"data_dir": str(tmp_path)})


def test_offline_errors_name_the_missing_files(tmp_path):
    with pytest.raises(realdata.DataUnavailable) as err:
        data.make("cifar100", {"data_dir": str(tmp_path)})
    msg = str(err.value)
    for part in (str(tmp_path / "cifar100" / "cifar-100-binary"), "train.bin", "test.bin",
                 "cifar-100-binary.tar.gz", "download: true"):
        assert part in msg, (part, msg)
    (tmp_path / "svhn").mkdir()
    _svhn_mat(tmp_path / "svhn" / "test_32x32.mat", _images(1), [3])
    with pytest.raises(realdata.DataUnavailable) as err:
        data.make("svhn", {"data_dir": str(tmp_path)})
    msg = str(err.value)
    assert str(tmp_path / "svhn") in msg and "train_32x32.mat" in msg, msg
    assert "test_32x32.mat" not in msg, msg  # present: not named missing


class _Served(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_download_is_checked_and_a_bad_one_removed(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    for name in realdata.SVHN_FILES:
        _svhn_mat(src / name, _images(2), [2, 10])
    asked = []

    def urlopen(url, timeout):
        asked.append(url)
        return _Served((src / url.rsplit("/", 1)[1]).read_bytes())

    monkeypatch.setattr(realdata.urllib.request, "urlopen", urlopen)
    with pytest.raises(realdata.CorruptData, match="train_32x32.mat does not have the official"):
        data.make("svhn", {"data_dir": str(tmp_path / "d"), "download": True})
    assert not list((tmp_path / "d" / "svhn").iterdir()), "a download failing its MD5 was kept"
    _trust(monkeypatch, *(src / n for n in realdata.SVHN_FILES))
    ds = data.make("svhn", {"data_dir": str(tmp_path / "d"), "download": True})
    assert list(ds.y_train) == [2, 0] and asked[-1] == realdata.SVHN_URL + "test_32x32.mat"


@pytest.mark.parametrize("with_filter", [True, False])
def test_an_archive_extracts_only_plain_members_inside_its_folder(tmp_path, monkeypatch,
                                                                  with_filter):
    """tarfile's "data" filter where Python has it (3.11.4+), the same rules checked by hand
    where it does not (Debian 12's 3.11.2): a member outside the folder, or a link, stops the
    extraction before anything is written."""
    errors = (realdata.CorruptData, *([tarfile.FilterError] if hasattr(tarfile, "FilterError")
                                      else []))
    if not with_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def archive(name, members):
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tf:
            for m, kind in members:
                info = tarfile.TarInfo(m)
                if kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                    tf.addfile(info)
                else:
                    info.size = 3
                    tf.addfile(info, io.BytesIO(b"abc"))
        return path

    good = archive("good.tar.gz", [("d/a.bin", "file"), ("d/b.bin", "file")])
    with tarfile.open(good) as tf:
        realdata.extract(tf, tmp_path / "out")
    assert (tmp_path / "out/d/a.bin").read_bytes() == b"abc"
    for name, members in [("up.tar.gz", [("d/a.bin", "file"), ("../evil.bin", "file")]),
                          ("link.tar.gz", [("d/a.bin", "file"), ("d/l", "link")])]:
        with tarfile.open(archive(name, members)) as tf, pytest.raises(errors):
            realdata.extract(tf, tmp_path / name.split(".")[0])
        assert not (tmp_path / "evil.bin").exists()
        assert not (tmp_path / name.split(".")[0] / "d" / "a.bin").exists()
    # an absolute name never lands at its absolute path (the filter strips the slash, the
    # check by hand refuses it)
    with tarfile.open(archive("abs.tar.gz", [(str(tmp_path / "abs.bin"), "file")])) as tf:
        try:
            realdata.extract(tf, tmp_path / "abs")
        except errors:
            pass
    assert not (tmp_path / "abs.bin").exists()
