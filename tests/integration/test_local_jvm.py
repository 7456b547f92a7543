"""A local session's JVM runs with medallion's collector and compiler settings
(medallion.jvm_options.LOCAL_JVM_OPTIONS), and a collector given by the user replaces the default."""

from __future__ import annotations

from medallion.session import local_conf


def test_the_shared_sessions_jvm_runs_the_parallel_collector_and_a_late_c2(spark):
    jvm = spark.sparkContext._jvm
    management = jvm.java.lang.management.ManagementFactory
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
    hotspot = management.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    assert hotspot.getVMOption("Tier4InvocationThreshold").getValue() == "50000"
    assert hotspot.getVMOption("Tier4BackEdgeThreshold").getValue() == "400000"


def test_a_collector_in_medallion_java_options_replaces_the_default_one(monkeypatch):
    monkeypatch.setenv("MEDALLION_JAVA_OPTIONS", "-XX:+UseG1GC -Xss4m")
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        options = local_conf()[key].split()
        assert "-XX:+UseParallelGC" not in options
        assert {"-XX:+UseG1GC", "-Xss4m"} <= set(options)
        # The user's options come after the defaults, so that they win.
        late_c2 = options.index("-XX:Tier4InvocationThreshold=50000")
        assert options.index("-Xss4m") > late_c2
    monkeypatch.setenv("MEDALLION_JAVA_OPTIONS", "-Xss4m")
    assert "-XX:+UseParallelGC" in local_conf()["spark.driver.extraJavaOptions"].split()


def test_java_serialization_streams_forget_each_object_once_written(spark):
    """A cached batch spilled to disk is read back through Java serialization; a stream reset
    after each object keeps its reader from holding every object it has read
    (``spark.serializer.objectStreamReset``, medallion/session.py)."""
    jvm = spark.sparkContext._jvm
    serializer = jvm.org.apache.spark.SparkEnv.get().serializer().newInstance()
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.util.ArrayList"))
    value = jvm.java.util.ArrayList(["x" * 1000])

    def written_size(times: int) -> int:
        out = jvm.java.io.ByteArrayOutputStream()
        stream = serializer.serializeStream(out)
        for _ in range(times):
            stream.writeObject(value, tag)  # the same object again: a back-reference, unless reset
        stream.close()
        return out.size()

    once, twice = written_size(1), written_size(2)
    assert twice > 1.9 * once
