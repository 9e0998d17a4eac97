package store

// Temporary: keeps go.mod's requirements while the packages that use them are written.
import (
	_ "connectrpc.com/connect"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/robfig/cron/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "golang.org/x/net/http2"
	_ "golang.org/x/sys/unix"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
