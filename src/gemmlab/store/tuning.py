"""The tables the tuners fill: the tuner's candidates and choices
(``tuned_candidates``, ``tuned``: :mod:`gemmlab.studies.tune`) and the
dispatcher's picks (``dispatch``: :mod:`gemmlab.studies.dispatch`), each
configuration stored as its :class:`~gemmlab.store.records.Config` text.
Part of :class:`gemmlab.store.store.Store`."""

from __future__ import annotations

from gemmlab.core.environment import now_utc
from gemmlab.store.database import Database
from gemmlab.store.records import PICK_FIELDS, Pick, config_text
from gemmlab.store.rows import CANDIDATE_FIELDS, TUNED_FIELDS
from gemmlab.store.schema import tuner_layout


class TuningTables(Database):
    """The tuner's candidates and choices, and the dispatcher's picks."""

    def add_candidate(self, candidate: dict) -> None:
        """Store one configuration the tuner tried (the keys of
        :data:`CANDIDATE_FIELDS`), replacing an earlier row of the same GPU,
        kernel, dtype, shape and configuration."""
        self._replace("tuned_candidates", CANDIDATE_FIELDS, {**candidate, "config": config_text(candidate["config"])})

    def set_tuned(self, choice: dict) -> None:
        """Store the configuration chosen for one GPU, kernel, dtype and size
        class (the keys of :data:`TUNED_FIELDS`), replacing the earlier choice."""
        self._replace("tuned", TUNED_FIELDS, {**choice, "config": config_text(choice["config"])})

    def candidates(self, gpu_name: str, kernel: str, dtype: str | None = None, status: str | None = None) -> list[dict]:
        """The configurations the tuner tried for ``kernel`` on ``gpu_name``
        (of one dtype and one status, or all), in the order they were stored.
        A read-only file the tuner never wrote has none; one from before
        dtypes (tuner tables of v1) holds float32 rows."""
        with self._guard():
            layout = tuner_layout(self._conn)
            if layout == 0:
                return []
            table = "tuned_candidates" if layout >= 2 else "(SELECT *, 'float32' AS dtype FROM tuned_candidates)"
            given = [(c, v) for c, v in (("gpu_name", gpu_name), ("kernel", kernel), ("dtype", dtype),
                                         ("status", status)) if v is not None]  # fmt: skip
            where = " AND ".join(f"{column} = ?" for column, _ in given)
            cursor = self._conn.execute(f"SELECT * FROM {table} WHERE {where} ORDER BY id", tuple(v for _, v in given))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def tuned_config(self, gpu_name: str, kernel: str, dtype: str, size_class: str) -> str | None:
        """The configuration (stored JSON) the tuner chose for these, or None.
        Reads a read-only file of any tuner layout without changing it: a file
        the tuner never wrote has none, and choices from before dtypes are float32."""
        with self._guard():
            layout = tuner_layout(self._conn)
            if layout == 0:
                return None
            stored_dtype = "dtype" if layout >= 2 else "'float32'"
            found = self._conn.execute(
                f"SELECT config FROM tuned WHERE gpu_name = ? AND kernel = ? AND {stored_dtype} = ? AND size_class = ?",
                (gpu_name, kernel, dtype, size_class),
            ).fetchone()
        return None if found is None else str(found[0])

    def set_pick(self, pick: Pick) -> None:
        """Store the dispatcher's pick for one (GPU, element type, shape) (its
        :data:`PICK_FIELDS`; the store gives the time), replacing the earlier one."""
        row = {name: getattr(pick, name) for name in PICK_FIELDS}
        row.update(config=pick.config.text, verified=int(bool(pick.verified)), created=now_utc())
        self._replace("dispatch", (*PICK_FIELDS, "created"), row)

    def picks(self, gpu_name: str | None = None, dtype: str | None = None) -> list[Pick]:
        """The dispatcher's stored picks (of one GPU, one element type, or all);
        none in a file from before schema v11."""
        if "dispatch" not in self._tables_guarded():
            return []
        given = [(c, v) for c, v in (("gpu_name = ?", gpu_name), ("dtype = ?", dtype)) if v is not None]
        query = "SELECT * FROM dispatch" + (" WHERE " + " AND ".join(c for c, _ in given) if given else "")
        with self._guard():
            cursor = self._conn.execute(query + " ORDER BY dtype, m, n, k", tuple(v for _, v in given))
            names = [d[0] for d in cursor.description]
            return [Pick.from_row(dict(zip(names, values, strict=True))) for values in cursor.fetchall()]
