"""A local session's file system: Hadoop's, with permissions set in the JVM (medallion/local_fs.py)."""

from __future__ import annotations

import stat

from medallion.local_fs import FILE_SYSTEM_CLASS, file_system_jar, find_javac


def test_the_session_sets_the_permissions_hadoop_would_without_a_process(spark, tmp_path):
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.fs
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = hadoop.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    if find_javac() is None:  # a JRE alone: Hadoop's own file system, as before
        assert file_system_jar() is None
        assert fs.getClass().getName() == "org.apache.hadoop.fs.LocalFileSystem"
        return
    assert fs.getClass().getName() == FILE_SYSTEM_CLASS

    def mode(path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    # Every bit lands where chmod would put it.
    for bits in (0o640, 0o604, 0o751, 0o777, 0o000):
        target = tmp_path / f"file-{bits:o}"
        fs.create(hadoop.Path(str(target))).close()
        fs.setPermission(hadoop.Path(str(target)), hadoop.permission.FsPermission(bits))
        assert mode(target) == bits
    # A new file and a new folder get Hadoop's defaults less its umask (022), as with Hadoop's own.
    created = tmp_path / "created"
    fs.create(hadoop.Path(str(created))).close()
    assert mode(created) == 0o644
    folder = tmp_path / "a" / "b"
    assert fs.mkdirs(hadoop.Path(str(folder)))
    assert mode(folder) == mode(folder.parent) == 0o755
