-- Headless Neovim with the plugin (editors/nvim), no server: the window/showDocument
-- handler the plugin installs, fed external URLs while vim.ui.open fails (no browser),
-- then :checkhealth tensorviz; :TensorVizShow opening the last graph again once a
-- browser opens. Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
vim.opt.rtp:prepend(assert(os.getenv("TV_PLUGIN")))
local result = { opened = {}, notes = {} }

local function finish(err)
  result.error = err
  local fh = assert(io.open(out_path, "w"))
  fh:write(vim.json.encode(result))
  fh:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  local browser = false
  vim.ui.open = function(url)
    table.insert(result.opened, url)
    if not browser then return nil, "vim.ui.open: no handler found (tried: wslview, xdg-open)" end
    return { wait = function() return { code = 0, stderr = "" } end }, nil
  end
  vim.notify = function(msg) table.insert(result.notes, msg) end
  local tv = require("tensorviz")
  tv.setup({ cmd = { "false" }, keymaps = false })
  result.commands = vim.tbl_keys(vim.api.nvim_get_commands({}))
  vim.cmd("TensorVizShow")  -- nothing opened yet
  local url = "http://127.0.0.1:1/tok/?capture=1"
  for _ = 1, 2 do
    local r = tv.show_document(nil, { uri = url, external = true }, { client_id = 1, method = "window/showDocument" }, {})
    result.handler_success = r.success
  end
  vim.cmd("checkhealth tensorviz")
  result.health_failed = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("bwipeout!")
  browser = true
  vim.cmd("TensorVizShow")
  tv.show_document(nil, { uri = url, external = true }, { client_id = 1, method = "window/showDocument" }, {})
  vim.cmd("checkhealth tensorviz")
  result.health_mixed = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
finish(not ok and tostring(err) or nil)
