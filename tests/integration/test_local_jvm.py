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
