"""First Spark start: resolve and cache Delta's jars, check a Delta round trip. Idempotent."""

from __future__ import annotations

import tempfile
import time


def main() -> None:
    start = time.time()
    from lbreplay.spark import get_spark

    with tempfile.TemporaryDirectory(prefix="lbreplay-warm-") as tmp:
        spark = get_spark(f"{tmp}/lake", master="local[1]")
        spark.range(3).write.format("delta").save(f"{tmp}/lake/_warm")
        n = spark.read.format("delta").load(f"{tmp}/lake/_warm").count()
        spark.stop()
    print(f"spark + delta ready ({n} rows round-tripped, {time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
