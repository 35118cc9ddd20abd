// Package orderstore is the PostgreSQL side of the order consumer: the one
// transaction per order-create message of seed §9.3, and the verification
// of an unknown commit outcome of seed §9.8.
package orderstore

import (
	"embed"
	"fmt"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

func mustSQL(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("orderstore: missing embedded query %s: %v", name, err))
	}
	return string(b)
}

var (
	qInboxInsert         = mustSQL("inbox_insert")
	qInboxGet            = mustSQL("inbox_get")
	qInboxFinish         = mustSQL("inbox_finish")
	qReservationUpsert   = mustSQL("reservation_upsert")
	qReservationLock     = mustSQL("reservation_lock")
	qReservationCreated  = mustSQL("reservation_created")
	qReservationRejected = mustSQL("reservation_rejected")
	qStockOccupy         = mustSQL("stock_occupy")
	qStockRestore        = mustSQL("stock_restore")
	qOrderInsert         = mustSQL("order_insert")
	qLedgerOccupy        = mustSQL("ledger_occupy")
	qOutboxInsert        = mustSQL("outbox_insert")
	qCompensationInsert  = mustSQL("compensation_insert")
	qControlGet          = mustSQL("control_get")
)
